"""MiniGPT Lab's Streamlit glue: only what needs `st`, shared by the pages.

- `navigation`: the list of pages (add a page there), each page's setup and the sidebar;
- `choices`: the learner's choices on Home (corpus, model source, device), kept across pages;
- `corpora`: the built-in and uploaded corpora;
- `models`: the model Generate and Attention use, from whichever source was chosen;
- `runs`: this session's training run, the process-wide run registry and the run in the URL;
- `uploads`: Home's file uploads (a corpus, a checkpoint zip);
- `text`: learner text made safe for markdown, durations.
Arrows point one way: pages -> app -> minigpt. The machinery (training threads, the run
registry, checkpoints) is plain Python in `minigpt`, tested without Streamlit.
"""
