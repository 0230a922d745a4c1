policiesdir = $(pkgdatadir)/policies
dist_policies_DATA = policies/read-only.json policies/workspace-write.json policies/full-access.json

# The same files compiled into cordon as its built-in profiles
# (src/builtin-profiles.h): generated in the build tree, never distributed.
EXTRA_DIST += policies/gen-builtin.sh
CLEANFILES += src/builtin-profiles.c
src/builtin-profiles.c: $(dist_policies_DATA) $(top_srcdir)/policies/gen-builtin.sh
	@$(MKDIR_P) src
	$(AM_V_GEN)files=; for f in $(dist_policies_DATA); do files="$$files $(srcdir)/$$f"; done; \
	AWK='$(AWK)' $(SHELL) $(top_srcdir)/policies/gen-builtin.sh $$files > $@.tmp && mv $@.tmp $@

# $(sysconfdir)/cordon/policies, searched before the profiles above
# (cordon-policy(5)), is where an admin puts profiles of their own: made
# empty, so that it is there to be found; removed on uninstall only if
# still empty.
install-data-local: install-sysconf-policydir
uninstall-local: uninstall-sysconf-policydir
install-sysconf-policydir:
	$(MKDIR_P) '$(DESTDIR)$(sysconfdir)/cordon/policies'
uninstall-sysconf-policydir:
	rmdir '$(DESTDIR)$(sysconfdir)/cordon/policies' '$(DESTDIR)$(sysconfdir)/cordon' 2>/dev/null || :
.PHONY: install-sysconf-policydir uninstall-sysconf-policydir
