"""A teacher's own lesson file for the tests: two steps, the second with one quick check."""
from __future__ import annotations

POEMS = """\
# Poems

## What comes next in a poem

view: next
page: Generate

A model reads a poem one character at a time. Yours knows {vocab} characters.

## Sampling a poem

view: sampling
page: Generate

### Check

? What does a temperature above 1 do?

- [ ] It always picks the likeliest character
- [x] It flattens the distribution
- [ ] It stops the model after one line

because: A larger T shrinks the gaps between the scores.
"""
