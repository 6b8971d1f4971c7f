"""What the lab's tests share: the shipped model and the demo sentence's ids."""
import pytest

from minigpt import load_pretrained
from minigpt.corpus import DEMO_SENTENCE


@pytest.fixture(scope="module")
def shipped():
    checkpoint = load_pretrained("course-zh")
    return checkpoint.model, checkpoint.tokenizer.encode(DEMO_SENTENCE)
