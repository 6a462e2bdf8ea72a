"""The model engine: model shapes (`config`), and the Llama-family decoder built on them."""
