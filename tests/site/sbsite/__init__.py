"""A site's rackbench extension, as a site would ship it: registered by entry points only (no rackbench code
changed): the ``sitedir`` cluster backend and the ``sitechat`` load generator."""
