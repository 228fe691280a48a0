# Install rules and the RavelConfig.cmake package (issue 5 fills this in).
