"""Encoder-only Transformer (BERT-like): predict each token's successor from the
whole sequence. python3 examples/transformer/encoder.py [--steps N]"""
import torch
import torch.nn as nn

from common import lm_loss, parse_args, tokens, train

VOCAB, D, HEADS, LAYERS, SEQ, BATCH = 512, 128, 4, 2, 32, 16


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, D))
        layer = nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, LAYERS)
        self.norm = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, x):
        return self.head(self.norm(self.enc(self.emb(x) + self.pos)))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = Encoder().to(args.device)

    def step(_):
        seqs = tokens(gen, BATCH, SEQ, VOCAB, args.device)
        return lm_loss(model(seqs[:, :-1]), seqs[:, 1:])

    train(model, step, args.steps, time_steps=args.time, label="encoder")


if __name__ == "__main__":
    main()
