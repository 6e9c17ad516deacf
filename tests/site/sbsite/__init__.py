"""A site's servebench extension, as a site would ship it: registered by entry points only (no servebench code
changed): the ``sitedir`` cluster backend and the ``sitechat`` load generator."""
