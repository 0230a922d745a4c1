EXTRA_DIST += man/cordon.1.scd man/cordon-policy.5.scd man/cordon-serve.1.scd \
	man/cordon-protocol.7.scd man/cordon-sandbox.7.scd
if HAVE_SCDOC
if OS_DARWIN
# The macOS front end has no Linux sandbox: cordon(1) (its MACOS section)
# and the policy files' page describe it, and with serve built, serve's
# page and the protocol's.
if MAC_SERVE
man1_MANS = man/cordon.1 man/cordon-serve.1
man5_MANS = man/cordon-policy.5
man7_MANS = man/cordon-protocol.7
else
man1_MANS = man/cordon.1
man5_MANS = man/cordon-policy.5
man7_MANS =
endif
else
man1_MANS = man/cordon.1 man/cordon-serve.1
man5_MANS = man/cordon-policy.5
man7_MANS = man/cordon-protocol.7 man/cordon-sandbox.7
endif
CLEANFILES += $(man1_MANS) $(man5_MANS) $(man7_MANS)
SUFFIXES = .scd
.scd:
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(SCDOC) < $< > $@
endif
