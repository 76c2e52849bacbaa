"""Test helpers shipped with the package: scripted agents and a fake model server."""
