"""kvplan serve: the calculator as an HTTP API and a web page, as thin as the CLI (docs/architecture.md).

A request is read into the same front doors the CLI uses (kvplan's own options, engine flags, a pasted launch
command), the core answers, and the answer is the document the CLI prints. FastAPI and uvicorn are the optional
`serve` extra; nothing here is imported by the other commands."""
