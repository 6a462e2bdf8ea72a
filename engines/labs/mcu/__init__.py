"""The MCU lab, without Qt: its settings (`settings`), state records (`records`), what it
computes from the engines (`session`: plans, layouts, host runs), snapshot section
(`section`), headless run (`run`) and bench (`bench`: the arena figures of `inferlab bench
mcu`). It sits above the board side (`engines/board`), which sits above the arena side
(`engines/mcu`)."""
