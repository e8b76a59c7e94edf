"""Stage 5, context: the files a prompt shows besides the modified ones, ranked (`builder`, `imports`,
`pool`, optionally `model_rank`) and fitted to the token budget (`tokens`)."""
