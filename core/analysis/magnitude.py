"""The smallest change worth reporting, apart from the detector (pure, no numpy), so that
what only reads the default (the settings, the agent's and benchctl's start) does not
import numpy: about 0.2 s of every process started."""

# A change under 2 % of the level is inside the run-to-run noise of a storage benchmark
# (1.5-4 % in bench/detect.py's series) and not worth a notification. On that bench the
# floor halves the false changes on pure noise (83 -> 36 of 3,927: most are 1-2 %) and
# removes no planted change (at least 5 % by construction; the smallest measured between
# adjacent segments is 3.6 %). Otava's min_magnitude defaults to 0 (no floor).
DEFAULT_MIN_MAGNITUDE_PCT = 2.0
