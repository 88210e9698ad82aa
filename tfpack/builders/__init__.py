"""Example builders: raw text or ids in, unpacked examples out, ready for `tfpack.data.pack`.

- `bert_pretraining_examples` (raw text -> NSP + MLM examples, as Google's
  ``create_pretraining_data``), with `create_bert_examples`,
  `tokenize_documents`, `load_vocab`, `compact_vocabulary` and
  `examples_to_dataset` for its steps.
- `causal_lm_examples` (documents cut into pieces) and `sft_examples`
  (prompt/response pairs); `preference_examples` (prompt, chosen and
  rejected: one packable item per pair, for `tfpack.models.PreferenceModel`).
- `classification_examples` (a text or a text pair and a label).
- `text_tokenizer` / `TextTokenizer`: the ``tokenizer=`` every builder takes
  (a model's own keras-hub tokenizer or preprocessor, a Hugging Face
  ``tokenizers.Tokenizer``, or a callable), with the special tokens the
  model's preprocessor adds and, for tagging and QA, character offsets
  (`tfpack.builders.offsets`).
- Without ``tokenizer=``: WordPiece read as BERT's reference tokenizer reads
  text (`tfpack.builders.wordpiece`), bundled bert-base-uncased vocabulary.
- `embedding_examples` (texts, optional contrastive group ids),
  `token_classification_examples` (words and their tags, aligned to the
  first sub-token; `word_predictions` reads predictions back per word) and
  `question_answering_examples` (strided context windows with character
  offsets; `best_answers` picks each question's answer text).
- `seq2seq_examples` (``{"inputs", "targets"}`` pairs for an encoder-decoder,
  framed as its keras-hub preprocessor frames them) and `pack_pairs`: whole
  pairs into pair packs (`tfpack.tasks.seq2seq`), first fit on both rows.

The builder functions are also exported by `tfpack.data`, where most users
meet them; the tokenizer adapter and the result types live here only. The
builders of `tf.data` datasets need TensorFlow (imported on first use);
`pack_pairs`, `preference_pair`, `seq2seq_examples` and the tokenizers do not.

Example:

>>> import tfpack
>>> ds = tfpack.builders.classification_examples(["a fine film", "dull"], [1, 0])
>>> sorted(ds.element_spec)
['input_ids', 'labels', 'token_type_ids']
"""

from tfpack import _tensorflow
from tfpack.builders.preference import preference_pair
from tfpack.builders.seq2seq import pack_pairs, seq2seq_examples
from tfpack.builders.tokenizers import TextTokenizer, text_tokenizer
from tfpack.builders.vocab import load_vocab

__all__ = [
    "QAExamples",
    "QAWindow",
    "TaggingExamples",
    "TextTokenizer",
    "bert_pretraining_examples",
    "best_answers",
    "causal_lm_examples",
    "classification_examples",
    "compact_vocabulary",
    "create_bert_examples",
    "embedding_examples",
    "examples_to_dataset",
    "load_vocab",
    "pack_pairs",
    "preference_examples",
    "preference_pair",
    "question_answering_examples",
    "seq2seq_examples",
    "sft_examples",
    "text_tokenizer",
    "token_classification_examples",
    "tokenize_documents",
    "word_predictions",
]

# The builders that return `tf.data` datasets, by module, imported on first use:
# the rest serves Keras on another backend without TensorFlow, where these raise
# `tfpack._tensorflow.TensorFlowMissing`.
_NEEDS_TENSORFLOW = {
    "bert": ("bert_pretraining_examples", "compact_vocabulary", "create_bert_examples",
             "examples_to_dataset", "tokenize_documents"),
    "causal_lm": ("causal_lm_examples", "sft_examples"),
    "classification": ("classification_examples",),
    "embedding": ("embedding_examples",),
    "preference": ("preference_examples",),
    "question_answering": ("QAExamples", "QAWindow", "best_answers",
                           "question_answering_examples"),
    "token_classification": ("TaggingExamples", "token_classification_examples",
                             "word_predictions"),
}
__getattr__, __dir__ = _tensorflow.on_first_use(
    globals(), {name: module for module, names in _NEEDS_TENSORFLOW.items() for name in names})
