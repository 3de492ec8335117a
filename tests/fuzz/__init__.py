"""Front-end fuzzing helpers shared by tests/test_fuzz_frontend.py and bench/fuzz_frontend.py.

- chooser.py: one small interface for random choices, backed by hypothesis
  (so failures shrink) or by `random.Random` (for the long bench run);
- scn_gen.py: `.scn` programs built from the language's grammar and builtins;
- mutate.py: token, line and character mutations of seed scenarios;
- seeds.py: the seed scenarios (examples/ and the language sketch);
- oracle.py: what must hold for any input (a built program or a positioned
  error, never a traceback, never C that fails to compile).
"""
