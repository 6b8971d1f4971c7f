"""app/advice.py: what the Train page advises after overfitting: only what the learner has not tried.

    pytest tests/app/test_advice.py
"""

def test_overfitting_advice_offers_only_what_the_learner_has_not_tried():
    from app import advice
    from minigpt.lab.diagnosis import Overfitting

    over = Overfitting(best_step=200, best_val=4.1, step=600, val=4.6, train_at_best=3.0, train=1.2)
    demo = advice.overfitting_warning(over, 448, early_stopping=False)
    assert "a larger corpus" in demo and "early stopping" in demo and "448 characters" in demo
    course = advice.overfitting_warning(over, 9_969, early_stopping=True)
    assert "a larger corpus" not in course and "early stopping" not in course and "dropout" in course


def test_perplexity_note_counts_one_character_in_the_singular_and_several_in_the_plural():
    from app import advice

    one = advice.perplexity_note(0.01)  # exp(0.01) ≈ 1.01: as unsure as among 1 character
    assert "among 1 character at random" in one and "1 characters" not in one
    several = advice.perplexity_note(2.0)  # exp(2) ≈ 7.39
    assert "= 7.4:" in several and "among 7 characters at random" in several
