"""The MCU lab's state records (`records`) and snapshot section (`section`), without Qt."""
