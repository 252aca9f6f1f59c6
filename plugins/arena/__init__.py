"""The arena plugin (``mosaic_arena``): operators (a trained policy, a script, ``random``) take the seats
of a multi-agent game; ``mosaic match`` plays them against each other; a single-agent worker trains in
a seat (``mosaic/TicTacToe-vs-random-v0``).

Third parties use :mod:`mosaic_arena.operators` (the operator protocol and its descriptor) and the
``mosaic_operators`` hook (:mod:`mosaic_arena.hookspecs`). Importing this package imports nothing heavy:
PettingZoo only when a game is made.
"""
