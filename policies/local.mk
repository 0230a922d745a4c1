policiesdir = $(pkgdatadir)/policies
dist_policies_DATA = policies/read-only.json policies/workspace-write.json policies/full-access.json
