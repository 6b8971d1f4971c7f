"""minigpt/batching.py: learners writing at once share each step, and each gets the text it gets alone.

    pytest tests/minigpt/test_batching.py
"""
import threading

import pytest
import torch

from helpers.tiny import tiny_lm
from minigpt import Sampling, SamplingError, batcher_for, load_pretrained
from minigpt.batching import Batcher
from minigpt.sample import stream
from minigpt.lab.knockout import Knockout, knocked_out

BLOCK = 16  # tiny_lm's max_len: a context this long refills

# (prompt, new tokens, settings, seed): every sampling path, prompts from one character to longer
# than the context, and writings long enough to refill the context more than once
LEARNERS = [
    ("t", 12, Sampling(temperature=0.8), 1),
    ("the cat", 40, Sampling(temperature=0.0), 2),
    ("the dog sat on the log.", 30, Sampling(temperature=1.0), 3),   # 23 characters: the last 16 are read
    ("the mat. the d", 25, Sampling(temperature=0.9, top_k=3), 4),
    ("sat on ", 50, Sampling(temperature=1.3, top_p=0.7), 5),
    ("the cat sat on t", 18, Sampling(temperature=0.7, top_k=5, top_p=0.9), 6),  # exactly BLOCK characters
    ("o", 7, Sampling(temperature=0.8), 7),
    ("the log", 33, Sampling(temperature=0.8), 8),
]


def alone(model, tok, prompt, new, sampling, seed):
    return list(stream(model, tok, prompt, max_new_tokens=new, sampling=sampling, seed=seed))


def assert_same_steps(got, expected):
    assert [s.text for s in got] == [s.text for s in expected]
    assert [s.context for s in got] == [s.context for s in expected]  # the refills fall on the same tokens
    assert [[c for c, _ in s.top] for s in got] == [[c for c, _ in s.top] for s in expected]
    assert [s.prob for s in got] == pytest.approx([s.prob for s in expected], abs=1e-5)


def run_until_done(batcher: Batcher, limit: int = 1000) -> int:
    steps = 0
    while batcher.step():
        steps += 1
        assert steps < limit
    return steps


def test_decode_rows_gives_a_full_forward_s_logits_for_rows_of_different_lengths():
    """Sequences of 16, 9 and 3 tokens starting at steps 0, 4 and 6, fed one token a step side by
    side, each row at its own position: each row's logits are the full forward pass's over its own
    sequence (the reference, no cache), and no row sees another's keys."""
    model, tok = tiny_lm()
    seqs = [tok.encode(t) for t in ("the dog sat on t", "the cat s", "the")]
    starts = [0, 4, 6]
    cache = model.new_kv_cache(3)
    got = [[] for _ in seqs]
    with torch.inference_mode():
        for t in range(len(seqs[0])):
            rows = [b for b, s in enumerate(seqs) if starts[b] <= t < starts[b] + len(s)]
            assert rows == list(range(len(rows)))  # rows 0..B-1, as the batcher keeps them
            positions = [t - starts[b] for b in rows]
            logits = model.decode_rows(torch.tensor([seqs[b][p] for b, p in zip(rows, positions)]),
                                       torch.tensor(positions), cache)
            for b in rows:
                got[b].append(logits[b])
        for b, s in enumerate(seqs):
            reference = model(torch.tensor([s]))[0][0]
            torch.testing.assert_close(torch.stack(got[b]), reference, atol=1e-5, rtol=1e-5)


def test_batched_greedy_writes_the_argmax_of_a_full_forward_each_step():
    """The reference by hand: argmax of a full forward over the last BLOCK tokens, each step, while
    another learner writes beside it."""
    model, tok = tiny_lm()
    batcher = Batcher(model)
    writing = batcher.submit(tok, "the ", 30, Sampling(temperature=0.0), 0)
    batcher.submit(tok, "sat", 30, Sampling(temperature=1.0), 9)
    run_until_done(batcher)
    full = tok.encode("the ")
    for _ in range(30):
        full.append(int(model(torch.tensor([full[-BLOCK:]]))[0][0, -1].argmax()))
    assert "".join(s.text for s in writing.ready()) == tok.decode(full[4:])


def test_each_learner_gets_the_text_it_gets_alone_joining_and_leaving_mid_batch():
    """Learners arrive between steps (three at once, then one by one), one leaves after 5 of its
    tokens, rows close up behind those who finish: each reads what sample.stream writes alone for
    its prompt, settings and seed: the same characters, probabilities, top-5 and context."""
    model, tok = tiny_lm()
    batcher = Batcher(model)
    writings = {}
    for i, learner in enumerate(LEARNERS):
        writings[i] = batcher.submit(tok, *learner)
        for _ in range(0 if i < 2 else 3):  # the first three join together, then one every 3 steps
            batcher.step()
    read = {i: [] for i in writings}
    leaver = 4
    while len(read[leaver]) < 5:
        batcher.step()
        read[leaver] += writings[leaver].ready()
    writings[leaver].cancel()  # the reader went away: its row is let go at the next step
    read[leaver] = read[leaver][:5]
    run_until_done(batcher)
    for i, learner in enumerate(LEARNERS):
        read[i] += writings[i].ready() if i != leaver else []
        expected = alone(model, tok, *learner)
        assert_same_steps(read[i], expected if i != leaver else expected[:5])
    assert batcher.busy == 0


def test_learners_who_write_together_share_each_step():
    """Ten learners asking 20 tokens at once take 20 steps of ten rows, not 200 steps of one."""
    model, tok = tiny_lm()
    batcher = Batcher(model)
    for seed in range(10):
        batcher.submit(tok, "the", 20, Sampling(temperature=0.8), seed)
    assert run_until_done(batcher) == 20
    assert (batcher.steps, batcher.rows_stepped) == (20, 200)


def test_more_learners_than_rows_wait_for_a_row_and_still_get_their_text():
    model, tok = tiny_lm()
    batcher = Batcher(model, max_rows=3)
    writings = [batcher.submit(tok, "the", 6 + seed, Sampling(temperature=0.8), seed) for seed in range(7)]
    run_until_done(batcher)
    assert batcher.rows_stepped == sum(6 + seed for seed in range(7))
    assert batcher.rows_stepped / batcher.steps <= 3
    for seed, writing in enumerate(writings):
        assert_same_steps(writing.ready(), alone(model, tok, "the", 6 + seed, Sampling(temperature=0.8), seed))


def test_the_shipped_model_writes_each_learner_s_text_in_a_batch():
    """The course's own model (a vocabulary of hundreds, a trained distribution): a class of 12 at
    once, every sampling path, in the loop's own thread, read by 12 threads."""
    checkpoint = load_pretrained("course-zh")
    model, tok = checkpoint.model.eval(), checkpoint.tokenizer
    prompts = ["注意力", "模型", "\n", "Transformer 的"]
    settings = [Sampling(0.8), Sampling(0.0), Sampling(1.0), Sampling(0.9, top_k=10), Sampling(1.1, top_p=0.8),
                Sampling(1.5, top_p=0.3)]
    learners = [(prompts[i % 4], 40 + 7 * i, settings[i % 6], 100 + i) for i in range(12)]
    batcher, results = Batcher(model), {}

    def learner(i):
        results[i] = list(batcher.stream(tok, *learners[i]))

    threads = [threading.Thread(target=learner, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)  # a guard against a lost wake-up hanging the suite, not a timing
        assert not t.is_alive()
    for i, args in enumerate(learners):
        assert_same_steps(results[i], alone(model, tok, *args))
    assert batcher.rows_stepped / batcher.steps > 1  # they shared steps


def test_a_reader_who_stops_reading_leaves_the_batch():
    model, tok = tiny_lm()
    batcher = Batcher(model)
    stopping = iter(batcher.submit(tok, "the", 2000, Sampling(0.8), 0))
    staying = batcher.submit(tok, "the", 10, Sampling(0.8), 1)
    batcher.step()
    next(stopping)
    stopping.close()  # what Streamlit does to a page's generator when the learner leaves it
    run_until_done(batcher)
    assert batcher.rows_stepped == 1 + 10  # the leaver wrote once, then its row went
    assert_same_steps(staying.ready(), alone(model, tok, "the", 10, Sampling(0.8), 1))


def test_a_hooked_model_writes_alone():
    """A window knock-out's copy calls a hook on each attention: it writes alone, its own text."""
    model, tok = tiny_lm()
    twin = knocked_out(model, Knockout(window=3))
    batcher = Batcher(twin)
    got = list(batcher.stream(tok, "the", 20, Sampling(0.8), 3))
    assert batcher.steps == 0
    assert_same_steps(got, alone(twin, tok, "the", 20, Sampling(0.8), 3))


def test_a_diverged_model_says_so_to_its_reader():
    model, tok = tiny_lm()
    with torch.no_grad():
        model.lm_head.weight.fill_(float("nan"))
    with pytest.raises(SamplingError, match="not numbers"):
        list(Batcher(model).stream(tok, "the", 5, Sampling(0.8), 0))


def test_bad_settings_are_refused_before_anything_runs():
    model, tok = tiny_lm()
    batcher = Batcher(model)
    with pytest.raises(SamplingError):
        batcher.submit(tok, "the", 0, Sampling(0.8), 0)
    with pytest.raises(TypeError):
        batcher.submit(tok, "the", 5, 0.8, 0)
    assert batcher.busy == 0


def test_one_batcher_per_model_and_it_keeps_no_model_alive():
    import gc
    import weakref

    model, _ = tiny_lm()
    assert batcher_for(model) is batcher_for(model)
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
