"""A GPT-2-small-sized decoder (12 layers, 12 heads, d=768, vocab 50257, context
1024: about 124M parameters), plain torch.nn, trained on generated tokens.
python3 examples/transformer/gpt2.py [--steps N] [--time]"""
import torch
import torch.nn as nn

from common import lm_loss, parse_args, tokens, train

VOCAB, D, HEADS, LAYERS, CTX = 50257, 768, 12, 12, 1024
BATCH, SEQ = 8, 256


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, dropout=0.0, batch_first=True)
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh"), nn.Linear(4 * D, D))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False, is_causal=True)[0]
        return x + self.mlp(self.ln2(x))


class GPT2(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(CTX, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.wte.weight  # tied, as in GPT-2

    def forward(self, x):
        n = x.size(1)
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=x.device)
        h = self.wte(x) + self.wpe(torch.arange(n, device=x.device))
        for b in self.blocks:
            h = b(h, mask)
        return self.head(self.ln_f(h))


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    model = GPT2().to(args.device)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"gpt2 parameters {nparams}", flush=True)

    def step(_):
        seqs = tokens(gen, BATCH, SEQ, VOCAB, args.device)
        return lm_loss(model(seqs[:, :-1]), seqs[:, 1:])

    train(model, step, args.steps, lr=3e-4, time_steps=args.time, label="gpt2")


if __name__ == "__main__":
    main()
