EXTRA_DIST += man/cordon.1.scd man/cordon-policy.5.scd
if HAVE_SCDOC
man1_MANS = man/cordon.1
man5_MANS = man/cordon-policy.5
CLEANFILES += $(man1_MANS) $(man5_MANS)
SUFFIXES = .scd
.scd:
	@$(MKDIR_P) $(@D)
	$(AM_V_GEN)$(SCDOC) < $< > $@
endif
