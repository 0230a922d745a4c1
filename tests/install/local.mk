# `make installcheck` (and so `make distcheck`): a smoke test of the
# installed tree, DESTDIR included (tests/install/installcheck.sh). The
# same smoke scripts are the Debian package's autopkgtest (debian/tests).
EXTRA_DIST += tests/install/installcheck.sh tests/install/smoke-run.sh \
	tests/install/smoke-serve.py

installcheck-local:
	$(AM_V_at)DESTDIR='$(DESTDIR)' srcdir='$(srcdir)' \
	bindir='$(bindir)' bin_programs='$(bin_PROGRAMS)' \
	pkglibexecdir='$(pkglibexecdir)' pkglibexec_programs='$(pkglibexec_PROGRAMS)' \
	policydir='$(policiesdir)' policies='$(dist_policies_DATA)' \
	sysconfdir='$(sysconfdir)' mandir='$(mandir)' \
	man_pages='$(man1_MANS) $(man5_MANS) $(man7_MANS)' \
	bashcompletiondir='$(bashcompletiondir)' bash_completion='$(dist_bashcompletion_DATA)' \
	zshcompletiondir='$(zshcompletiondir)' zsh_completion='$(dist_zshcompletion_DATA)' \
	fishcompletiondir='$(fishcompletiondir)' fish_completion='$(dist_fishcompletion_DATA)' \
	systemdsystemunitdir='$(systemdsystemunitdir)' \
	system_units='$(systemdsystemunit_DATA) $(dist_systemdsystemunit_DATA)' \
	systemduserunitdir='$(systemduserunitdir)' \
	user_units='$(systemduserunit_DATA) $(dist_systemduserunit_DATA)' \
	$(SHELL) $(srcdir)/tests/install/installcheck.sh
