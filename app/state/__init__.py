"""State: what the session and the server hold, and what it computes once for every page. The learner's
choices, the corpora, the runs and their line, the loaded model, the shared results, the class, the
kept comparison, the Train form's settings, the lesson's steps. Imports chrome, never a part or a view."""
