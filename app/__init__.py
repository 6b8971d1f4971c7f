"""MiniGPT Lab's Streamlit glue: only what needs `st`, shared by the pages. A page is a thin script
in pages/ that calls one module here per view; the README's file tree says what each module holds.
Arrows point one way: pages -> app -> minigpt. The machinery (training threads, the run registry,
checkpoints) is plain Python in `minigpt`, tested without Streamlit.
"""
