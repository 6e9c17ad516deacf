"""What every stage of the pipeline uses: errors, strict files, the polling loop, process groups, secrets, the number
formatter, the results folder's paths, the entry-point registry."""
