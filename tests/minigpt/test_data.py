"""minigpt/data.py: the split of a corpus's tokens, and batches of shifted windows; a corpus's fit
checked from its length (minigpt.corpus) agrees with the checks on its tokens.

    pytest tests/minigpt/test_data.py
"""
import pytest
import torch

from minigpt import CorpusError, check_corpus_fits
from minigpt.data import check_batch_fits, get_batch, split_tokens


def test_split_refuses_a_corpus_shorter_than_a_block():
    ids = torch.arange(40)
    train, val = split_tokens(ids, 0.25, 8)
    assert torch.equal(torch.cat([train, val]), ids) and len(val) == 10
    with pytest.raises(CorpusError, match="block_size"):
        split_tokens(ids, 0.1, 8)


def test_batches_are_shifted_windows_of_the_token_tensor():
    data = torch.arange(100)
    x, y = get_batch(data, 5, 7, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 7)
    assert torch.equal(y, x + 1)  # next-token targets
    assert torch.equal(x[:, 1:], x[:, :-1] + 1)  # contiguous windows


def test_batches_are_reproducible_from_the_generator():
    data = torch.arange(1000)
    a = get_batch(data, 4, 8, torch.Generator().manual_seed(3))
    b = get_batch(data, 4, 8, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0])


@pytest.mark.parametrize("length, block_size, batch_size, message",
                         [(40, 8, 4, "validation split has 4"), (8, 8, 1, "training split has 8 tokens"),
                          (100, 8, 83, "83 is more than the 82 distinct windows")])
def test_corpus_fit_from_its_length_matches_the_checks_on_its_tokens(length, block_size, batch_size, message):
    with pytest.raises(CorpusError, match=message) as by_length:
        check_corpus_fits(length, 0.1, block_size, batch_size)
    with pytest.raises(CorpusError) as by_tokens:
        train, _ = split_tokens(torch.arange(length), 0.1, block_size)
        check_batch_fits(train, batch_size, block_size)
    assert str(by_length.value) == str(by_tokens.value)
    check_corpus_fits(100, 0.1, 8, 82)
