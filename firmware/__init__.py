"""The board firmware's C sources (core/, ports/, main.c, the Makefile), shipped as package data
of `inferlab.firmware` so that an installed InferLab can build them; no Python here.
`engines.board.toolchain` finds this folder and runs its Makefile."""
