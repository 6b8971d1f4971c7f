"""Class board: every posted run of a class on one live chart, for the projector."""
from minigpt import N_

from app import navigation
from app.chrome import site
from app.views import board

navigation.open_page(site.BOARD, N_(
    "Everyone trains with different settings, then the class looks together at what happened. The teacher "
    "starts a class and shares its link; a learner who opens it posts runs from Train or Experiments, under a "
    "name of their choosing. Only that name, the run's settings, its curves and its samples are shown."))

board.board_page()
