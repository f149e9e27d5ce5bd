"""`python -m assay.testing.mock_openai`: the mock served in the foreground until SIGINT or SIGTERM."""

from assay.testing.mock_openai._server import main

main()
