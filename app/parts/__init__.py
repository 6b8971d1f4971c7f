"""Parts: what more than one page draws. The prompt box, the sampling sliders, attention heatmaps, the
next-character chart, the logit lens, one attention weight, the line for a training slot, the Train
form, the comparison, posting to the class board, the lesson's links and the lesson in class. Imports
state and chrome, and parts below it; never a view."""
