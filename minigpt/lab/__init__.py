"""The instruments: what the lab measures in a model, built on the core and never used by it.

- `tasks`: generated tasks whose right answer and right attention are known, and their scorer;
- `diagnosis`: what a run's numbers say (overfitting, unseen characters, the uniform loss);
- `heads`: what attention does on a learner's own text: one row step by step, each head's pattern;
- `predictions`: what the model predicts: the next character before and after sampling, the logit
  lens, each character's loss;
- `embeddings`: what the position and embedding tables hold;
- `knockout`: a copy of a model with one part taken out, and what each head is worth;
- `scaling`: the reference demo's √d_k experiment;
- `scaling_race`: a scaled and an unscaled model trained side by side;
- `run_records`: finished runs kept for comparison, and their exports.
"""
