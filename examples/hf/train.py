"""Tiny HuggingFace Trainer run labelled with IngeroTrainerCallback.

The model is built from a config (no download); runs on CPU.

    sudo ingero trace --record --annotate &
    HF_HUB_OFFLINE=1 python examples/hf/train.py --steps 4
    ingero query --group-by step

Needs `pip install "ingero-annotate[hf]"` (or ./ingero-annotate/python).
"""

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from ingero_annotate.integrations.hf import IngeroTrainerCallback


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 100, (n, 16), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps")
    parser.add_argument("--accumulation", type=int, default=1, help="gradient accumulation steps")
    parser.add_argument("--evaluate", action="store_true", help="also run trainer.evaluate()")
    parser.add_argument("--run-id", default="hf-example")
    args = parser.parse_args()

    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=2)
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        training_args = TrainingArguments(
            output_dir=out,
            max_steps=args.steps,
            per_device_train_batch_size=4,
            per_device_eval_batch_size=4,
            gradient_accumulation_steps=args.accumulation,
            use_cpu=True,
            report_to=[],
            save_strategy="no",
            logging_strategy="no",
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=RandomTokens(4 * args.steps * args.accumulation),
            eval_dataset=RandomTokens(8),
            callbacks=[IngeroTrainerCallback(run_id=args.run_id)],
        )
        trainer.train()
        if args.evaluate:
            trainer.evaluate()


if __name__ == "__main__":
    main()
