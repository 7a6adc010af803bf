tool
extends EditorPlugin


func _enter_tree() -> void:
	add_custom_type("VillageBridge", "Node", preload("res://addons/village_bridge/village_bridge.gd"), null)


func _exit_tree() -> void:
	remove_custom_type("VillageBridge")
