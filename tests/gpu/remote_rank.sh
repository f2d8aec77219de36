#!/bin/bash
# tests/gpu/remote_rank.sh: a torchrun worker through libremote.so, one server per
# rank (torchrun --no-python ... bash remote_rank.sh python3 script.py ...).
# Rank LOCAL_RANK's server is entry LOCAL_RANK of RG_REMOTE_GPUS (HOST:PORT,
# comma-separated); RG_LIBREMOTE is the library to preload.
IFS=, read -r -a servers <<<"${RG_REMOTE_GPUS:?}"
export REMOTE_GPU=${servers[${LOCAL_RANK:?}]:?no server for local rank $LOCAL_RANK}
export LD_PRELOAD=${RG_LIBREMOTE:?}
exec "$@"
