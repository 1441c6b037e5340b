"""Simulated clients: the agent protocol at a declared rate, no fio (see __main__)."""
