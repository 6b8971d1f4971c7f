"""app/state/run_notes.py: what the Train page advises after overfitting: only what the learner has not tried.

    pytest tests/app/test_run_notes.py
"""

def test_overfitting_advice_offers_only_what_the_learner_has_not_tried():
    from app.state import run_notes
    from minigpt.lab.diagnosis import Overfitting

    over = Overfitting(best_step=200, best_val=4.1, step=600, val=4.6, train_at_best=3.0, train=1.2)
    demo = run_notes.overfitting_warning(over, 448, early_stopping=False)
    assert "a larger corpus" in demo and "early stopping" in demo and "448 characters" in demo
    course = run_notes.overfitting_warning(over, 9_969, early_stopping=True)
    assert "a larger corpus" not in course and "early stopping" not in course and "dropout" in course


def test_perplexity_note_counts_one_character_in_the_singular_and_several_in_the_plural():
    from app.state import run_notes

    one = run_notes.perplexity_note(0.01)  # exp(0.01) ≈ 1.01: as unsure as among 1 character
    assert "among 1 character at random" in one and "1 characters" not in one
    several = run_notes.perplexity_note(2.0)  # exp(2) ≈ 7.39
    assert "= 7.4:" in several and "among 7 characters at random" in several
