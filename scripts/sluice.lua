#!lua name=sluice
