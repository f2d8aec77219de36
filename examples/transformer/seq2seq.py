"""Encoder-decoder Transformer: learn to reverse a sequence.
python3 examples/transformer/seq2seq.py [--steps N]"""
import torch
import torch.nn as nn

from common import lm_loss, parse_args, train

VOCAB, D, HEADS, LAYERS, SEQ, BATCH = 256, 128, 4, 2, 24, 16
BOS = 0


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(1, SEQ + 1, D))
        self.tf = nn.Transformer(D, HEADS, LAYERS, LAYERS, 4 * D, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, VOCAB)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(SEQ), persistent=False)

    def forward(self, src, tgt_in):
        s = self.emb(src) + self.pos[:, : src.size(1)]
        t = self.emb(tgt_in) + self.pos[:, : tgt_in.size(1)]
        return self.head(self.tf(s, t, tgt_mask=self.mask, tgt_is_causal=True))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = Seq2Seq().to(args.device)

    def step(_):
        src = torch.randint(1, VOCAB, (BATCH, SEQ), generator=gen).to(args.device)
        tgt = src.flip(1)
        tgt_in = torch.cat([torch.full((BATCH, 1), BOS, device=args.device), tgt[:, :-1]], 1)
        return lm_loss(model(src, tgt_in), tgt)

    train(model, step, args.steps, time_steps=args.time, label="seq2seq")


if __name__ == "__main__":
    main()
