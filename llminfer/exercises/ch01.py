"""Answers to notebook 01's "Try it" questions (filled in with the notebook)."""

from llminfer.exercises import Exercise

EXERCISES: tuple[Exercise, ...] = ()
