from transformers import PreTrainedTokenizer
from .tool_declaration_ts import encode_tools


class KimiLikeTokenizer(PreTrainedTokenizer):
    def __init__(self, **kw):
        self.vocab = {'a': 0, 'b': 1}
        super().__init__(**kw)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def get_vocab(self):
        return dict(self.vocab)

    def _tokenize(self, text):
        return [c for c in encode_tools(text) if c in self.vocab]

    def _convert_token_to_id(self, token):
        return self.vocab[token]

    def _convert_id_to_token(self, i):
        return 'ab'[i]
