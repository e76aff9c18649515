# The serve command the interactive profile was measured with (the kit's run.sh runs the same
# engine through `k3kit launch`). Stored in the buyer receipt as argv, never run by a shell.
vllm serve /srv/models --config profiles/interactive/single-node-8gpu/serve.yaml \
  --host 127.0.0.1 --port 8000
