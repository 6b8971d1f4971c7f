"""Serving a class: training runs in background threads that other sessions can watch and
steer (`runner`), and the process's registry of them, with its cap and owners (`registry`)."""
