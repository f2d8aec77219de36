"""Decoder-only Transformer (GPT-like, causal mask): next-token prediction.
python3 examples/transformer/decoder.py [--steps N]"""
import torch
import torch.nn as nn

from common import lm_loss, parse_args, tokens, train

VOCAB, D, HEADS, LAYERS, SEQ, BATCH = 512, 128, 4, 2, 32, 16


class Decoder(nn.Module):
    def __init__(self, vocab=VOCAB, d=D, heads=HEADS, layers=LAYERS, seq=SEQ):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, seq, d))
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, x):
        n = x.size(1)
        h = self.blocks(self.emb(x) + self.pos[:, :n], mask=self.mask[:n, :n], is_causal=True)
        return self.head(self.norm(h))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = Decoder().to(args.device)

    def step(_):
        seqs = tokens(gen, BATCH, SEQ, VOCAB, args.device)
        return lm_loss(model(seqs[:, :-1]), seqs[:, 1:])

    train(model, step, args.steps, time_steps=args.time, label="decoder")


if __name__ == "__main__":
    main()
