from .ts_helpers import lower


def encode_tools(text):
    return lower(text)
