"""Signals of the bisects app: a bisect or try job ended (sent once its outcome is
committed), for what follows from it without `execute` importing it (`confirm`)."""

from django.dispatch import Signal

# sender=Bisect, bisect=the ended Bisect (its state and outcome written)
bisect_ended = Signal()
