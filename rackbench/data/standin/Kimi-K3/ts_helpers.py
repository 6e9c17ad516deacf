def lower(text):
    return text.lower()
