"""The MCU lab: its state records (`records`), snapshot section (`section`), headless run
(`run`) and bench (`bench`: the arena figures of `inferlab bench mcu`), without Qt. It sits
above the board side (`engines/board`), which sits above the arena side (`engines/mcu`)."""
