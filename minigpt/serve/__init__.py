"""Serving a class: training runs in background threads that other sessions can watch and
steer (`runner`), the process's registry of them, with its cap and owners (`registry`), heavy
requests taken in turn (`turns`), and the classes whose learners post runs to one board (`board`)."""
