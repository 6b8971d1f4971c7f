"""MiniGPT Lab's Streamlit glue: only what needs `st`. A page is a thin script in pages/ that opens
with `navigation` and draws its view. The rooms, each importing only the ones below it:

    navigation   what every page does first: the page's setup, the address, the sidebar
    views/       one page's view; never another view
    parts/       what more than one page draws
    state/       what the session and the server hold
    chrome/      the pages' list, the address, the language, the look

Arrows point one way: pages -> app -> minigpt. The machinery (training processes, the run registry,
the class board, checkpoints) is plain Python in `minigpt`, tested without Streamlit.
"""
